package sandboxd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors, one per error-envelope code of the API.  An *APIError
// matches the sentinel of its code with errors.Is:
//
//	if errors.Is(err, sandboxd.ErrNotFound) { … }
var (
	ErrInvalidRequest     = sentinel("invalid_request")
	ErrUnauthenticated    = sentinel("unauthenticated")
	ErrForbidden          = sentinel("forbidden")
	ErrNotFound           = sentinel("not_found")
	ErrMethodNotAllowed   = sentinel("method_not_allowed")
	ErrConflict           = sentinel("conflict")
	ErrPayloadTooLarge    = sentinel("payload_too_large")
	ErrQuotaExceeded      = sentinel("quota_exceeded")
	ErrRateLimited        = sentinel("rate_limited")
	ErrInternal           = sentinel("internal")
	ErrBadGateway         = sentinel("bad_gateway")
	ErrRuntimeUnavailable = sentinel("runtime_unavailable")
	ErrNotReady           = sentinel("not_ready")
)

var errorsByCode = map[string]error{}

// sentinel makes the error of an envelope code, known by that code.
func sentinel(code string) error {
	e := errors.New("sandboxd: " + code)
	errorsByCode[code] = e
	return e
}

// APIError is an error answer of the daemon: its error envelope
// {"error": {code, message, message_i18n, request_id, details}}.
// Message is in the client's language (WithLanguage), MessageI18n has
// every language the daemon sent ("en", "fr").
type APIError struct {
	Status      int               // HTTP status
	Code        string            // the envelope's code, or "http_<status>" without one
	Message     string            // in the Accept-Language asked for
	MessageI18n map[string]string // "en", "fr"
	RequestID   string            // the envelope's request_id, else X-Request-Id
	Details     map[string]any    // e.g. "field" of a validation error, "limit" of a 429
	RetryAfter  time.Duration     // the answer's Retry-After; 0 when it had none
	Body        []byte            // the raw answer
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("sandboxd: %d %s: %s", e.Status, e.Code, e.Message)
	if e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	return s
}

// Is makes errors.Is(err, ErrNotFound) and friends work.
func (e *APIError) Is(target error) bool {
	s, ok := errorsByCode[e.Code]
	return ok && s == target
}

// Field is details.field of a validation error ("limits.memory"), or "".
func (e *APIError) Field() string {
	s, _ := e.Details["field"].(string)
	return s
}

// Limit is details.limit of a 429 ("requests_per_second", "sessions", …), or "".
func (e *APIError) Limit() string {
	s, _ := e.Details["limit"].(string)
	return s
}

// Violations is details.violations: every JSON Schema violation of a
// manifest apply (Index the document, Path in it) or of a tool's input
// (paths under "/input"); nil for other errors.
func (e *APIError) Violations() []Violation {
	raw, ok := e.Details["violations"]
	if !ok {
		return nil
	}
	var out []Violation
	if b, err := json.Marshal(raw); err != nil || json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}

// TransportError is a request that got no answer: the daemon could not be
// reached, the connection broke, or the time ran out.  A timeout (the
// client's per-request one or the caller's context deadline) unwraps to
// context.DeadlineExceeded, a cancelled context to context.Canceled.
type TransportError struct {
	Op     string // the operationId
	Method string
	URL    string
	Err    error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("sandboxd: %s %s: %v", e.Method, e.URL, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// Timeout reports whether the request ran out of time.
func (e *TransportError) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.Is(e.Err, context.DeadlineExceeded) || (errors.As(e.Err, &t) && t.Timeout())
}

type envelope struct {
	Error *struct {
		Code        string            `json:"code"`
		Message     string            `json:"message"`
		MessageI18n map[string]string `json:"message_i18n"`
		RequestID   string            `json:"request_id"`
		Details     map[string]any    `json:"details"`
	} `json:"error"`
}

// errorFromBody builds the error of an HTTP error answer (an envelope, or
// anything else).
func errorFromBody(status int, body []byte, retryAfter time.Duration, requestID string) *APIError {
	e := &APIError{Status: status, Code: fmt.Sprintf("http_%d", status), RetryAfter: retryAfter,
		RequestID: requestID, Body: body, MessageI18n: map[string]string{}, Details: map[string]any{}}
	var env envelope
	if json.Unmarshal(body, &env) != nil || env.Error == nil {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 500 {
			e.Message = e.Message[:500]
		}
		if e.Message == "" {
			e.Message = fmt.Sprintf("HTTP %d", status)
		}
		return e
	}
	if env.Error.Code != "" {
		e.Code = env.Error.Code
	}
	e.Message = env.Error.Message
	if env.Error.MessageI18n != nil {
		e.MessageI18n = env.Error.MessageI18n
	}
	if env.Error.RequestID != "" {
		e.RequestID = env.Error.RequestID
	}
	if env.Error.Details != nil {
		e.Details = env.Error.Details
	}
	return e
}
