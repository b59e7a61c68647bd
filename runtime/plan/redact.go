package plan

import (
	"net/url"
	"strings"
)

// RedactURL is an engine URL as the router shows it: in /admin/state, logs, errors and
// `router compile` output. A password becomes "xxxxx" (url.URL.Redacted), and so does a
// user name given alone, the usual place of a bearer token in a URL
// (http://TOKEN@host). Credentials in an engine URL are for the engine, never for
// whoever reads the router's state or logs. A URL that does not parse is shown only up
// to its scheme, since where its credentials end cannot be known.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		scheme, _, _ := strings.Cut(raw, "://")
		return scheme + "://(unparsable, redacted)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); !ok {
			u.User = url.User("xxxxx")
		}
	}
	return u.Redacted()
}
