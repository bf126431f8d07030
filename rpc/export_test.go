package rpc

// ReplyHeaders is the application headers every call made without
// WithEnvelope shares.
func ReplyHeaders[Req, Rep any](r *Requester[Req, Rep]) map[string]any { return r.replyHeaders }
