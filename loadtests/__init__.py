"""Load generation: the experiments' open-loop replayer (a record per request), the overload
benchmarks' lean flood (outcomes counted), and, apart, Locust files that nothing imports."""
