"""The slackwise adapter: the serving process (``adapter.serving``: the HTTP front door,
admission, deadlines, dispatch, chains, the GPU route) that runs the pure, clock-injected
policies of :mod:`slackwise_policies` (batching, slack, AIMD, scaling, placement), which the
simulator runs too. The command line is ``slackwise_cli``."""
