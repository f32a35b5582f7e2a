"""The ``slackwise`` command line and the experiment harness: serve, up, experiment (repeats,
disturbances), simulate, replay, plot, report, demo, manifests, ROMA live."""
