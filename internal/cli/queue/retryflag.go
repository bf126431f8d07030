package queue

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq/retry"
)

// parseRetryPolicy reads a retry policy in the family's notation, the one
// retry.Policy.String writes: none(), fixed(N, D) or exponential(N, D, MAX),
// followed by any of .giveUpAfter(D), .withJitter(F) and
// .waitInBrokerFrom(D). Delays are Go durations (500ms, 5s, 1m, 1h).
func parseRetryPolicy(s string) (retry.Policy, error) {
	fail := func(format string, args ...any) (retry.Policy, error) {
		return retry.Policy{}, fmt.Errorf("--retry %q: "+format+"; write for example exponential(5, 1s, 1m) or fixed(3, 30s).giveUpAfter(1h)", append([]any{s}, args...)...)
	}
	calls, err := splitCalls(s)
	if err != nil {
		return fail("%v", err)
	}
	var p retry.Policy
	for i, c := range calls {
		if i == 0 {
			p, err = startPolicy(c)
		} else {
			p, err = modifyPolicy(p, c)
		}
		if err != nil {
			return fail("%v", err)
		}
	}
	if err := p.Err(); err != nil {
		return retry.Policy{}, fmt.Errorf("%w (--retry %q); write for example exponential(5, 1s, 1m) or fixed(3, 30s).giveUpAfter(1h)", err, s)
	}
	return p, nil
}

// startPolicy is the policy a notation's first call names: none(),
// fixed(N, D) or exponential(N, D, MAX).
func startPolicy(c call) (retry.Policy, error) {
	switch c.name {
	case "none":
		if len(c.args) != 0 {
			return retry.Policy{}, errors.New("none() takes nothing")
		}
		return retry.None(), nil
	case "fixed":
		if len(c.args) != 2 {
			return retry.Policy{}, errors.New("fixed takes the attempts and a delay")
		}
		n, err1 := strconv.Atoi(c.args[0])
		d, err2 := time.ParseDuration(c.args[1])
		if err := errors.Join(err1, err2); err != nil {
			return retry.Policy{}, err
		}
		return retry.Fixed(n, d), nil
	case "exponential":
		if len(c.args) != 3 {
			return retry.Policy{}, errors.New("exponential takes the attempts, the first delay and the cap")
		}
		n, err1 := strconv.Atoi(c.args[0])
		d, err2 := time.ParseDuration(c.args[1])
		m, err3 := time.ParseDuration(c.args[2])
		if err := errors.Join(err1, err2, err3); err != nil {
			return retry.Policy{}, err
		}
		return retry.Exponential(n, d, m), nil
	}
	return retry.Policy{}, fmt.Errorf("a policy starts with none(), fixed(…) or exponential(…), not %s(…)", c.name)
}

// modifyPolicy applies one of the calls after the first: .giveUpAfter(D),
// .withJitter(F) or .waitInBrokerFrom(D).
func modifyPolicy(p retry.Policy, c call) (retry.Policy, error) {
	if len(c.args) != 1 {
		return p, fmt.Errorf("%s takes one value", c.name)
	}
	switch c.name {
	case "giveUpAfter", "waitInBrokerFrom":
		d, err := time.ParseDuration(c.args[0])
		if err != nil {
			return p, err
		}
		if c.name == "giveUpAfter" {
			return p.GiveUpAfter(d), nil
		}
		return p.WaitInBrokerFrom(d), nil
	case "withJitter":
		f, err := strconv.ParseFloat(c.args[0], 64)
		if err != nil {
			return p, err
		}
		return p.Jitter(f), nil
	}
	return p, fmt.Errorf("unknown modifier .%s(…) (want .giveUpAfter, .withJitter or .waitInBrokerFrom)", c.name)
}

type call struct {
	name string
	args []string
}

// splitCalls splits "a(x, y).b(z)" into its calls.
func splitCalls(s string) ([]call, error) {
	var out []call
	rest := strings.TrimSpace(s)
	for rest != "" {
		if len(out) > 0 {
			if !strings.HasPrefix(rest, ".") {
				return nil, fmt.Errorf("expected .modifier(…) at %q", rest)
			}
			rest = rest[1:]
		}
		open := strings.IndexByte(rest, '(')
		end := strings.IndexByte(rest, ')')
		if open <= 0 || end < open {
			return nil, fmt.Errorf("expected name(…) at %q", rest)
		}
		c := call{name: strings.TrimSpace(rest[:open])}
		if inner := strings.TrimSpace(rest[open+1 : end]); inner != "" {
			for _, a := range strings.Split(inner, ",") {
				c.args = append(c.args, strings.TrimSpace(a))
			}
		}
		out = append(out, c)
		rest = strings.TrimSpace(rest[end+1:])
	}
	if len(out) == 0 {
		return nil, errors.New("empty")
	}
	return out, nil
}
