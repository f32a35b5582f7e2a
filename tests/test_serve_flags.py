"""``slackwise serve``'s flags over the config's ``adapter`` section (:func:`with_flags`): a flag
given replaces its key, one not given leaves the file's value, and a bad one is a one-line exit."""

from __future__ import annotations

import argparse

import pytest

from slackwise_cli.serve import add_arguments, with_flags
from slackwise_config import parse_config

CONFIG = {
    "functions": {"digits": {"model": "digits", "slo_ms": 100}},
    "adapter": {"host": "127.0.0.1", "namespace": "from-file", "stage_policy": "ED-DYN"},
}


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["-c", "unused.yaml", *argv])


def test_flags_given_replace_their_keys_and_the_rest_stay_as_the_file_says() -> None:
    config = parse_config(CONFIG, "serve.yaml")
    changed = with_flags(
        config, _args("--host", "0.0.0.0", "--context", "kind-a", "--stage-policy", "gs")
    )
    assert changed.adapter.host == "0.0.0.0"
    assert changed.adapter.kube_context == "kind-a"
    assert changed.adapter.stage_policy == "GS"  # the policy's own spelling
    assert changed.adapter.namespace == "from-file"
    assert changed.functions == config.functions


def test_no_flags_leave_the_config_as_it_is() -> None:
    config = parse_config(CONFIG, "serve.yaml")
    assert with_flags(config, _args()) is config


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--stage-policy", "fastest"), "slackwise: --stage-policy:"),
        (("--probe-port", "70000"), "--probe-port must be a TCP port, got 70000"),
    ],
)
def test_a_bad_flag_is_a_one_line_exit(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(SystemExit) as info:
        with_flags(parse_config(CONFIG, "serve.yaml"), _args(*argv))
    assert message in str(info.value)
