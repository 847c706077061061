"""The relevance floor's term share (``store/floor.py``), for words and for CJK runs."""

from __future__ import annotations

import pytest

from aider_gardener.store.floor import MIN_TERM_SHARE, term_share


@pytest.mark.parametrize(
    "query, text, close",
    [
        ("why did the deploy fail", "the deploy failed at step 3", True),
        ("why did the deploy fail on staging", "the build is green", False),
        # the words 部署 and 失败, not the question's 为什么 or 老是: a close match
        ("为什么部署老是失败", "部署脚本在服务器上一直失败，日志里说权限不够", True),
        ("为什么部署老是失败", "我们把登录页面的颜色改成蓝色吧", False),
        ("为什么部署老是失败", "为什么颜色老是这样", False),  # function characters only
        ("deploy 为什么失败", "deploy 脚本失败了", True),
    ],
)
def test_a_close_match_shares_half_the_query(query, text, close):
    assert (term_share(query, text) >= MIN_TERM_SHARE) is close


def test_no_searchable_word_shares_nothing():
    assert term_share("the and of", "the and of") == 0.0
    assert term_share("", "anything") == 0.0
