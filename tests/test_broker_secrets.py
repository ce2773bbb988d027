"""Where `class --broker` and `worker` take the broker's URL and the class key from, and the
signatures made with the key (conformance/classroom/credentials.py, signing.py)."""

import os

import pytest

from conformance.classroom import credentials, signing
from conformance.classroom.command import main_class, main_worker
from conformance.usage import UsageError

KEY = b"k" * 32


@pytest.mark.parametrize(
    "url", ["redis://:secret@host:6379/0", "redis://user:secret@host/0", "redis://host/0?password=x"]
)
def test_a_url_with_a_password_on_the_command_line_is_refused(url):
    with pytest.raises(UsageError, match="holds a password"):
        credentials.broker_url(url, None)


def test_the_class_and_the_worker_refuse_it_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(credentials.URL_VAR, raising=False)
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "alice.py").write_text("print('hi')\n")
    url = "redis://:secret@host:6379/0"
    assert main_class([str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--broker", url]) == 2
    assert main_worker(["--broker", url]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 2  # one line each
    for error in errors:
        assert "holds a password" in error and "PYOPS_BROKER_URL" in error and "--broker-file" in error
    assert not (tmp_path / "out").exists()


def test_the_url_and_the_key_are_taken_out_of_the_environment(monkeypatch):
    monkeypatch.setenv(credentials.URL_VAR, "redis://:secret@host:6379/0")
    monkeypatch.setenv(credentials.KEY_VAR, KEY.decode())
    assert credentials.broker_url(credentials.FROM_ENV, None) == "redis://:secret@host:6379/0"
    assert credentials.broker_key(None) == KEY
    assert credentials.URL_VAR not in os.environ and credentials.KEY_VAR not in os.environ  # gradings inherit neither


def test_a_url_without_a_password_and_not_redis(monkeypatch):
    monkeypatch.delenv(credentials.URL_VAR, raising=False)
    assert credentials.broker_url("redis://host:6379/0", None) == "redis://host:6379/0"
    with pytest.raises(UsageError, match="Redis URL"):
        credentials.broker_url("amqp://host", None)
    with pytest.raises(UsageError, match="is not set"):
        credentials.broker_url(None, None)
    assert credentials.shown("redis://user:secret@host:6379/0?password=x") == "redis://host:6379/0"


def test_a_key_missing_or_short_is_refused(monkeypatch):
    monkeypatch.delenv(credentials.KEY_VAR, raising=False)
    with pytest.raises(UsageError, match="no key"):
        credentials.broker_key(None)
    monkeypatch.setenv(credentials.KEY_VAR, "short")
    with pytest.raises(UsageError, match="5 characters long"):
        credentials.broker_key(None)


def test_a_secret_file_must_be_the_callers_own_and_unreadable_by_others(tmp_path):
    secret = tmp_path / "broker"
    secret.write_text("redis://:secret@host:6379/0\n")
    secret.chmod(0o600)
    assert credentials.broker_url(None, str(secret)) == "redis://:secret@host:6379/0"
    secret.chmod(0o640)
    with pytest.raises(UsageError, match=r"may be read or changed by others \(mode 0640\): chmod 600"):
        credentials.broker_url(None, str(secret))
    with pytest.raises(UsageError, match="cannot read it"):
        credentials.broker_key(str(tmp_path / "none"))
    with pytest.raises(UsageError, match="not a regular file"):
        credentials.broker_key(str(tmp_path))


def test_only_what_was_sealed_with_the_key_and_as_its_kind_unseals():
    content = {"id": "t1", "batch": "b", "outcome": {"status": "graded", "seconds": 1.5}}
    sealed = signing.seal(KEY, signing.RESULT, content)
    assert signing.unseal(KEY, signing.RESULT, sealed) == content
    assert signing.unseal(b"x" * 32, signing.RESULT, sealed) is None  # another key
    assert signing.unseal(KEY, signing.TASK, sealed) is None  # a result is no task
    tampered = sealed.replace("graded", "error")
    assert tampered != sealed and signing.unseal(KEY, signing.RESULT, tampered) is None
    for junk in (None, 3, "", "[]", '{"text": "{}"}', '{"text": "{}", "hmac": "\\u00e9"}', '{"text": 1, "hmac": ""}'):
        assert signing.unseal(KEY, signing.RESULT, junk) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away needs root")
def test_a_secret_file_of_another_user_is_refused(tmp_path):
    secret = tmp_path / "key"
    secret.write_text("k" * 32)
    secret.chmod(0o600)
    os.chown(str(secret), os.geteuid() + 1, -1)
    with pytest.raises(UsageError, match="belongs to uid %d, not to you" % (os.geteuid() + 1)):
        credentials.broker_key(str(secret))
