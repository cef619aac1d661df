package paddock.ext.nopost.http_test

import data.paddock.ext.nopost.http

request(method, host) := {"action": "request", "request": {"scheme": "https", "host": host, "port": 443, "method": method, "path": "/v1/items"}}

test_post_is_refused if {
	count(http.deny) == 1 with input as request("POST", "api.example.com")
}

test_get_is_fine if {
	count(http.deny) == 0 with input as request("GET", "api.example.com")
}

test_post_elsewhere_is_fine if {
	count(http.deny) == 0 with input as request("POST", "uploads.example.com")
}

test_the_host_is_inspected if {
	http.inspect with input as {"action": "tunnel", "request": {"host": "api.example.com", "port": 443}}
}

test_other_hosts_are_not_inspected if {
	not http.inspect with input as {"action": "tunnel", "request": {"host": "pypi.org", "port": 443}}
}
