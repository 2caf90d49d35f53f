"""The policy: which one applies (request, key, pool), what a value may be, and when a retry wins."""

from __future__ import annotations

import pytest

from hunyuan_serve.qa import policy
from hunyuan_serve.qa.flags import Flag


def test_the_request_wins_over_the_key_which_wins_over_the_pool() -> None:
    assert policy.effective("off", "retry", "flag") == "off"
    assert policy.effective(None, "retry", "flag") == "retry"
    assert policy.effective(None, None, "flag") == "flag"


@pytest.mark.parametrize("value", ["on", "", 1, True, ["flag"]])
def test_a_value_that_is_no_policy_is_refused_naming_the_choices(value: object) -> None:
    with pytest.raises(policy.PolicyInvalid, match="qa must be one of off, flag, retry"):
        policy.parse_policy(value)
    assert policy.parse_policy(None) is None and policy.parse_policy("retry") == "retry"


def test_a_second_answer_replaces_the_first_only_when_it_fails_fewer_checks() -> None:
    one, two = [Flag("echo", "")], [Flag("echo", ""), Flag("loop", "")]
    assert policy.better(two, one) and policy.better(one, [])
    assert not policy.better(one, one) and not policy.better(one, two) and not policy.better([], [])
