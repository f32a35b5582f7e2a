"""The adapter's serving process: its HTTP server and limits, routes, the door, one dispatcher
per function, chains, upstreams (the platform's replicas, Knative Services, fixed V2
endpoints), the advisor loop, the GPU route and the cores, metrics and records; wired from the
config by :mod:`adapter.serving.wiring`."""
