"""The slackwise adapter: the pure, clock-injected policies (``adapter.policies``: batching, slack,
AIMD, scaling, placement) and the serving process that runs them (``adapter.serving``: the HTTP
front door, admission, deadlines, dispatch, chains, the GPU route). The command line is
``slackwise_cli``."""
