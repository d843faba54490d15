"""benchcheck.masking, the one masking helper of pack, its report and the QA harness (pure)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchcheck.masking import Masker, is_secret_name, redact, secret_values


@pytest.mark.parametrize(("text", "masked"), [
    ('curl -H "Authorization: Bearer sk-abc123" http://x', 'curl -H "Authorization: Bearer ***" http://x'),
    ("authorization: token ghp_xyz", "authorization: token ***"),
    ("vllm serve m --api-key sk-1 --port 8001", "vllm serve m --api-key *** --port 8001"),
    ("vllm serve m --api-key='sk-1' x", "vllm serve m --api-key='***' x"),
    ("HF_TOKEN=hf_abcdefghijklmnopqrstu CUDA_VISIBLE_DEVICES=0", "HF_TOKEN=*** CUDA_VISIBLE_DEVICES=0"),
    ('export MY_API_KEY="k-123" && run', 'export MY_API_KEY="***" && run'),
    ("served hf_abcdefghijklmnopqrstu;", "served ***;"),
    ("xhf_abcdefghijklmnopqrstu stays", "xhf_abcdefghijklmnopqrstu stays"),
    ('{"cmd": "x --api-key sk-a\\" y"}', '{"cmd": "x --api-key ***\\" y"}'),  # the JSON escape is kept
    ("İstanbul --api-key abc", "İstanbul --api-key ***"),  # lower() changes the length here
    ("--api-key\nnext line", "--api-key\nnext line"),  # a pattern never crosses a line
    ("TOKENIZERS_PARALLELISM=false", "TOKENIZERS_PARALLELISM=false"),
    # vLLM's startup line, an argparse dump and JSON: a quoted value of an api_key field, each of a list.
    ("non-default args: {'model_tag': 'Q/m', 'api_key': ['sk-a1', 'k-b2'], 'port': 8001}",
     "non-default args: {'model_tag': 'Q/m', 'api_key': ['***', '***'], 'port': 8001}"),
    ("Namespace(host=None, api_key='sk-a1', port=8001)", "Namespace(host=None, api_key='***', port=8001)"),
    ('{"openai_api_key": "sk-a1", "api_key_env": "VAR", "apiKey": null}',
     '{"openai_api_key": "***", "api_key_env": "VAR", "apiKey": null}'),
    ("İ api_key='sk-a1'", "İ api_key='***'"),  # lower() changes the length here
    ("api_key=None, 'api_key': [], api_key: ''", "api_key=None, 'api_key': [], api_key: ''"),
    # An HTTP header line, any case, as curl sends it, shows it (-v) and http.client's debug prints it.
    ("x-api-key: sk-a1", "x-api-key: ***"),
    ("X-Api-Key:sk-a1\nnext", "X-Api-Key:***\nnext"),
    ("> API-KEY: sk-a1", "> API-KEY: ***"),
    ('curl -H "x-api-key: sk-a1" http://x', 'curl -H "x-api-key: ***" http://x'),
    ("send: b'POST /v1 HTTP/1.1\\r\\nX-API-Key: sk-a1\\r\\n'", "send: b'POST /v1 HTTP/1.1\\r\\nX-API-Key: ***\\r\\n'"),
    ("> Authorization: Bearer sk-a1", "> Authorization: Bearer ***"),
    # A YAML (or .env-style) line, quoted or not.
    ("OPENAI_API_KEY: sk-a1", "OPENAI_API_KEY: ***"),
    ("env:\n  openai_api_key: 'sk-a1'  # c\n  - HF_TOKEN: \"t-1\"\n  GH_TOKEN: ghp_a1",
     "env:\n  openai_api_key: '***'  # c\n  - HF_TOKEN: \"***\"\n  GH_TOKEN: ***"),
    ("İ\nMY_API_KEY: sk-a1", "İ\nMY_API_KEY: ***"),  # lower() changes the length here
    # Ordinary text stays: prose, counts and tokenizer fields, a field that names a variable, nulls.
    ("the api key: see below; send the x-api-key: header", "the api key: see below; send the x-api-key: header"),
    ("max_tokens: 16\nMAX_TOKENS: 16\npad_token: <pad>\neos_token: '</s>'",
     "max_tokens: 16\nMAX_TOKENS: 16\npad_token: <pad>\neos_token: '</s>'"),
    ("api_key_env: OPENAI_API_KEY\napi_key: null\nx-api-key: None",
     "api_key_env: OPENAI_API_KEY\napi_key: null\nx-api-key: None"),
    ("ERROR: INVALID TOKEN: see the logs", "ERROR: INVALID TOKEN: see the logs"),
])
def test_patterns_keep_what_is_around(text: str, masked: str) -> None:
    assert redact(text) == masked


def test_known_values_in_every_spelling() -> None:
    secret = 'pa"ss\\wörd-1'
    m = Masker([secret, "short"])
    line = " | ".join([json.dumps({"k": secret}), json.dumps({"k": secret}, ensure_ascii=False), secret])
    out = m.text(line)
    assert "pa" not in out and out.count("***") == 3
    assert [json.loads(p) for p in out.split(" | ")[:2]] == [{"k": "***"}] * 2
    assert m.text("short") == "short"  # under 8 characters: not a secret worth masking
    assert m.value({"a": [secret, 1], secret: None}) == {"a": ["***", 1], secret: None}  # keys are structure


@given(st.text(alphabet=st.characters(codec="utf-8", blacklist_categories=("Cs",)), max_size=80))
def test_masking_without_secrets_changes_nothing(text: str) -> None:
    if any(w in text.lower() for w in ("api", "token", "secret", "password", "authorization", "hf_")):
        return
    assert Masker(["a-long-secret-value"]).text(text) == text


@pytest.mark.parametrize(("name", "secret"), [
    ("OPENAI_API_KEY", True), ("HF_TOKEN", True), ("NGC_API_KEY", True), ("EVAL_LLM_JUDGE_API_KEY", True),
    ("AWS_SECRET_ACCESS_KEY", True), ("DB_PASSWORD", True), ("MYSQL_PASS", True), ("GH_CREDENTIALS", True),
    ("VLM_KEY", True), ("apikey", True),
    ("TOKENIZERS_PARALLELISM", False), ("SSH_AUTH_SOCK", False), ("MONKEY", False), ("PATH", False),
    ("HF_HUB_ENABLE_HF_TRANSFER", False), ("BYPASS", False),
])
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_secret_values_from_the_environment() -> None:
    env = {"A_TOKEN": "tok-123456\nsecond-line", "B_API_KEY": "1", "PATH": "/usr/bin:/bin"}
    assert secret_values(env, extra=["hub-token-xyz"]) == ["hub-token-xyz", "second-line", "tok-123456"]
