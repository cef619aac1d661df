# api.example.com is read-only for agents on this host: no POST from any
# sandbox, whatever a session's own network policy allows.
package paddock.ext.nopost.http

deny contains "POST to api.example.com is refused on this host: the API is read-only for agents" if {
	input.action == "request"
	input.request.host == "api.example.com"
	input.request.method == "POST"
}

# A rule on methods or paths sees HTTPS requests only when the proxy
# intercepts TLS: ask for that for this host (without interception, HTTPS
# to it is then refused, which fails closed).
inspect if input.request.host == "api.example.com"
