// What the tests and benches that import this module also use: the HTTP GET of /metrics and /readyz.
@_exported import HeraldHTTPProbe
