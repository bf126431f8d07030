package rpc

// ReplyHeaders is the application headers every call made without
// WithEnvelope shares.
func ReplyHeaders[Req, Rep any](r *Requester[Req, Rep]) map[string]any { return r.replyHeaders }

// ReplyBoundDone is closed once the responder's reply contexts are ended.
func ReplyBoundDone(r *Responder) <-chan struct{} { return r.bound.base.Done() }
