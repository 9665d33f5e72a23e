"""The error code and message a client is told (broker/error_responses.error_fields), on a real broker."""

from __future__ import annotations

from support.brokers import WireClient, broker_thread

from pyspark_logsource.broker.error_responses import (
    UNKNOWN_SERVER_ERROR_MESSAGE,
    error_fields,
    error_response,
)
from pyspark_logsource.errors import ConfigError, InvalidTopic, NotCoordinator, UnknownServerError
from pyspark_logsource.protocol import ApiKey
from pyspark_logsource.protocol.messages import DescribeClusterRequest
from pyspark_logsource.protocol.txn_messages import StagedTxnsRequest

SECRET = "sasl.jaas.config=password=hunter2 in /etc/secret/broker.properties"


def test_a_typed_error_is_answered_with_its_code_and_message():
    assert error_fields(InvalidTopic("topic name 'a/b' contains illegal characters")) == (
        InvalidTopic.code,
        "topic name 'a/b' contains illegal characters",
    )
    assert error_fields(NotCoordinator()) == (NotCoordinator.code, NotCoordinator.__doc__)
    assert error_fields(InvalidTopic("x")).code == InvalidTopic.code


def test_an_untyped_or_client_side_error_is_unknown_server_error_without_its_text():
    for e in (RuntimeError(SECRET), KeyError(SECRET), ConfigError(SECRET)):
        code, message = error_fields(e)
        assert code == UnknownServerError.code
        assert message == UNKNOWN_SERVER_ERROR_MESSAGE and "hunter2" not in message


def test_a_broker_bug_is_answered_with_unknown_server_error_and_the_connection_goes_on(tmp_path):
    with broker_thread(tmp_path) as b:

        def bug(req, session):
            raise RuntimeError(SECRET)

        b._broker.handlers.by_key[ApiKey.DESCRIBE_CLUSTER] = bug
        with WireClient(b.bootstrap) as c:
            resp = c.request(DescribeClusterRequest(), check=False)
            assert resp.error_code == UnknownServerError.code
            assert resp.error_message == UNKNOWN_SERVER_ERROR_MESSAGE
            assert "hunter2" not in repr(resp) and "Traceback" not in repr(resp)
            assert c.create_topic("after-the-bug") == 0  # the same connection is still served


class _AnyRequest:
    """A request of any API with no entries: every field an empty list (what error_response reads)."""

    def __getattr__(self, name: str) -> list:
        return []


def test_every_api_the_broker_serves_has_an_error_response(tmp_path):
    """A handler that fails as a whole is answered in its API's shape, for every API key the broker serves
    (StagedTxns had no case: a failed one raised ValueError where a response was owed)."""
    with broker_thread(tmp_path) as b:
        keys = sorted(b._broker.handlers.by_key)
    missing = []
    for key in keys:
        try:
            resp = error_response(key, _AnyRequest(), UnknownServerError.code, UNKNOWN_SERVER_ERROR_MESSAGE)
        except ValueError:
            missing.append(key)
            continue
        assert resp is not None, key
    assert not missing, f"no error response for api keys {missing}"


def test_a_failed_staged_txns_request_is_answered_with_its_error(tmp_path):
    with broker_thread(tmp_path) as b:

        def bug(req, session):
            raise RuntimeError(SECRET)

        b._broker.handlers.by_key[ApiKey.STAGED_TXNS] = bug
        with WireClient(b.bootstrap) as c:
            resp = c.request(StagedTxnsRequest(action=0, write_id="w"), check=False)
            assert resp.error_code == UnknownServerError.code
            assert resp.error_message == UNKNOWN_SERVER_ERROR_MESSAGE
            assert c.create_topic("after-the-staged-bug") == 0
