"""The adapter's policies, pure and clock-injected (the time is an argument, no I/O): the
scheduling controller, batching, deadlines and slack, admission, AIMD and the modes, latency
models, the advisor and its driver, ROMA; each owns its settings type
(:mod:`slackwise_policies.settings_error`). The same objects run live, simulated and in tests."""
