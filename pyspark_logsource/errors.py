"""Typed errors shared by the broker and the clients.

Every broker-side error carries a numeric ``code`` that travels in protocol
responses; the client turns a code back into the same exception type with
:func:`error_for_code`. Codes follow Kafka's numbering where Kafka has the
concept, so that people who know Kafka recognise them.
"""

from __future__ import annotations


class LogSourceError(Exception):
    """Base class of every error raised by pyspark-logsource."""

    code: int = -1
    retriable: bool = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.__class__.__doc__ or self.__class__.__name__)
        self.message = message


class UnknownServerError(LogSourceError):
    """The broker hit an unexpected error while handling the request."""

    code = -1


class OffsetOutOfRange(LogSourceError):
    """The requested offset is outside the range the log holds."""

    code = 1


class CorruptRecord(LogSourceError):
    """A record batch failed its size or CRC checks."""

    code = 2


class UnknownTopicOrPartition(LogSourceError):
    """The topic or partition does not exist on this broker."""

    code = 3
    retriable = True


class InvalidFetchSize(LogSourceError):
    """The fetch size is not valid."""

    code = 4


class LeaderNotAvailable(LogSourceError):
    """The partition has no leader right now."""

    code = 5
    retriable = True


class NotLeaderOrFollower(LogSourceError):
    """This broker is not the leader of the partition."""

    code = 6
    retriable = True


class RequestTimedOut(LogSourceError):
    """The request did not complete in time."""

    code = 7
    retriable = True


class MessageTooLarge(LogSourceError):
    """A record batch is larger than message.max.bytes."""

    code = 10


class NetworkError(LogSourceError):
    """The connection to the broker failed or was closed."""

    code = 13
    retriable = True


class CoordinatorNotAvailable(LogSourceError):
    """The group coordinator is not available."""

    code = 15
    retriable = True


class InvalidTopic(LogSourceError):
    """The topic name is not valid."""

    code = 17


class RecordListTooLarge(LogSourceError):
    """A produce request is larger than the broker accepts."""

    code = 18


class StaleControllerEpoch(LogSourceError):
    """A controller whose epoch is no longer current tried to act (it was replaced)."""

    code = 11


class InvalidReplicaAssignment(LogSourceError):
    """A CreateTopics replica assignment is not valid (unequal lengths, repeated or unknown brokers)."""

    code = 39


class NotController(LogSourceError):
    """CreateTopics/DeleteTopics reached a broker that is not the controller (ask Metadata for it)."""

    code = 41
    retriable = True


class BrokerIdConflict(LogSourceError):
    """Another live ZooKeeper session holds this broker.id's registration (/brokers/ids/<id>)."""

    code = 1200


class DirectoryInUse(LogSourceError):
    """Another process (or another broker or load in this process) holds the lock on this data directory."""

    code = 1201


class NotEnoughReplicas(LogSourceError):
    """Fewer in-sync replicas than min.insync.replicas: an acks=all write is refused before it is appended."""

    code = 19
    retriable = True


class NotEnoughReplicasAfterAppend(LogSourceError):
    """The write was appended but the in-sync replicas fell below min.insync.replicas before it was committed."""

    code = 20
    retriable = True


class OffsetNotAvailable(LogSourceError):
    """A new leader's high watermark has not yet reached the start of its epoch: its "latest" is not known yet."""

    code = 78
    retriable = True


class FencedLeaderEpoch(LogSourceError):
    """The request names a leader epoch older than the partition's current one."""

    code = 74
    retriable = True


class UnknownLeaderEpoch(LogSourceError):
    """The request names a leader epoch newer than this broker knows."""

    code = 75
    retriable = True


class OffsetMetadataTooLarge(LogSourceError):
    """A committed offset's metadata is longer than offset.metadata.max.bytes."""

    code = 12


class FetchSessionIdNotFound(LogSourceError):
    """An incremental fetch names a fetch session the broker does not have (KIP-227)."""

    code = 70
    retriable = True


class InvalidFetchSessionEpoch(LogSourceError):
    """An incremental fetch's epoch is not the one its fetch session expects (KIP-227)."""

    code = 71
    retriable = True


class InvalidRequiredAcks(LogSourceError):
    """The acks value is not supported."""

    code = 21


class InvalidTimestamp(LogSourceError):
    """A timestamp is outside the accepted range."""

    code = 32


class UnsupportedVersion(LogSourceError):
    """The api key or version is not supported by the broker."""

    code = 35


class InvalidGroupId(LogSourceError):
    """The group id is empty or not valid."""

    code = 24


class InvalidReplicationFactor(LogSourceError):
    """The replication factor is not valid for this cluster."""

    code = 38


class TopicDeletionDisabled(LogSourceError):
    """Topic deletion is disabled on the broker (delete.topic.enable=false)."""

    code = 73


class TopicAlreadyExists(LogSourceError):
    """A topic with this name already exists."""

    code = 36


class InvalidPartitions(LogSourceError):
    """The number of partitions is not valid."""

    code = 37


class InvalidConfig(LogSourceError):
    """A configuration value is not valid."""

    code = 40


class InvalidRequest(LogSourceError):
    """The request is malformed."""

    code = 42


class OutOfOrderSequence(LogSourceError):
    """A producer batch arrived with a sequence number that leaves a gap."""

    code = 45


class DuplicateSequence(LogSourceError):
    """A producer batch was already appended (idempotent producer retry)."""

    code = 46


class InvalidProducerEpoch(LogSourceError):
    """The producer epoch is older than the one the broker knows."""

    code = 47


class InvalidTxnState(LogSourceError):
    """The transaction cannot do this now (e.g. its staged data was aborted after its timeout)."""

    code = 48


class InvalidProducerIdMapping(LogSourceError):
    """The transactional id has no producer id, or not the one the request names."""

    code = 49


class InvalidTransactionTimeout(LogSourceError):
    """transaction.timeout.ms is above the broker's transaction.max.timeout.ms (or not positive)."""

    code = 50


class ConcurrentTransactions(LogSourceError):
    """The transactional id's previous transaction is still being completed; retry."""

    code = 51
    retriable = True


class OperationNotAttempted(LogSourceError):
    """Not attempted because another part of the same request failed."""

    code = 55


class ProducerFenced(LogSourceError):
    """A newer producer with the same transactional id bumped the epoch: this one is fenced."""

    code = 90


class TransactionalIdNotFound(LogSourceError):
    """The transactional id is unknown to the coordinator."""

    code = 105


class StorageError(LogSourceError):
    """The broker could not read or write its log directory."""

    code = 56


class UnknownProducerId(LogSourceError):
    """The broker has no state for this producer id."""

    code = 59


class UnsupportedCompressionType(LogSourceError):
    """The compression codec is not supported."""

    code = 76


class InvalidRecord(LogSourceError):
    """A record is not valid for its topic (Kafka's INVALID_RECORD: e.g. no key on a compacted topic)."""

    code = 87

    def __init__(self, message: str = "", record_errors: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        #: indexes of the offending records within their batch (Produce v8+ record_errors, KIP-467):
        #: a client fails those with INVALID_RECORD and may retry the others of the batch
        self.record_errors = record_errors


# Group coordination (Kafka's codes).


class CoordinatorLoadInProgress(LogSourceError):
    """The coordinator is still loading the group's state; retry."""

    code = 14
    retriable = True


class NotCoordinator(LogSourceError):
    """This broker is not the coordinator of the group; find the coordinator again."""

    code = 16
    retriable = True


class IllegalGeneration(LogSourceError):
    """The generation id is not the group's current one (a rebalance happened); rejoin."""

    code = 22


class InvalidCommitOffsetSize(LogSourceError):
    """The offset commit is too large for the coordinator's offsets topic (Kafka's INVALID_COMMIT_OFFSET_SIZE)."""

    code = 28


class InconsistentGroupProtocol(LogSourceError):
    """The member's protocol type or protocols do not match the group's."""

    code = 23


class UnknownMemberId(LogSourceError):
    """The member id is not a member of the group (it left or its session expired); rejoin."""

    code = 25


class InvalidSessionTimeout(LogSourceError):
    """session.timeout.ms is outside [group.min.session.timeout.ms, group.max.session.timeout.ms]."""

    code = 26


class RebalanceInProgress(LogSourceError):
    """The group is rebalancing; the member must rejoin."""

    code = 27
    retriable = True


class NonEmptyGroup(LogSourceError):
    """The group has members; the operation needs an empty group."""

    code = 68


class GroupIdNotFound(LogSourceError):
    """The group does not exist."""

    code = 69


class MemberIdRequired(LogSourceError):
    """JoinGroup v4+: rejoin with the member id given in this response."""

    code = 79


class GroupMaxSizeReached(LogSourceError):
    """The group has group.max.size members already."""

    code = 81


class GroupSubscribedToTopic(LogSourceError):
    """OffsetDelete: the group's members are subscribed to the topic, its offsets are in use."""

    code = 86


class FencedInstanceId(LogSourceError):
    """KIP-345: a newer member with this ``group.instance.id`` replaced the requesting member id."""

    code = 82


class UnknownTopicId(LogSourceError):
    """No topic has this topic id."""

    code = 100


class FencedMemberEpoch(LogSourceError):
    """KIP-848: the member's epoch is fenced; it must give up its partitions and rejoin with epoch 0."""

    code = 110


class UnreleasedInstanceId(LogSourceError):
    """KIP-848: another member still holds this ``group.instance.id``; it must leave first."""

    code = 111


class UnsupportedAssignor(LogSourceError):
    """KIP-848: the ``group.remote.assignor`` the member asked for is not one of the broker's."""

    code = 112


class StaleMemberEpoch(LogSourceError):
    """KIP-848: an OffsetCommit/OffsetFetch with an epoch that is not the member's current one; retry."""

    code = 113


# Replica administration: ElectLeaders, AlterPartitionReassignments (Kafka's codes).


class PreferredLeaderNotAvailable(LogSourceError):
    """A preferred election: the preferred replica is not alive or not in the ISR."""

    code = 80


class EligibleLeadersNotAvailable(LogSourceError):
    """An unclean election: no live replica may lead."""

    code = 83


class ElectionNotNeeded(LogSourceError):
    """The election would change nothing (the preferred replica leads; a live leader exists)."""

    code = 84


class NoReassignmentInProgress(LogSourceError):
    """A reassignment was cancelled where none is in progress."""

    code = 85


# Client-side errors: they never travel on the wire, so their codes are
# outside Kafka's range.


class ClientError(LogSourceError):
    """Base class of errors raised only on the client side."""

    code = 1000


class BufferFull(ClientError):
    """The producer's buffer.memory is exhausted and max.block.ms passed."""

    code = 1001


class ClientClosed(ClientError):
    """The client was closed."""

    code = 1002


class ConfigError(ClientError):
    """An option given to a client, the CLI or the data source is not valid."""

    code = 1003


# Exactly-once loads (pyspark_logsource/offsets, jobs/etl.py); codes 1100+.


class CommitConflict(ClientError):
    """Another load committed the same manifest sequence first (two writers on one output)."""

    code = 1100


class AuditMismatch(ClientError):
    """Rows written per topic-partition differ from the committed offset ranges."""

    code = 1101


class CommittedDataMissing(ClientError):
    """A file named by a committed manifest is in neither the staging nor the published tree."""

    code = 1102


class UnsupportedSaslMechanism(LogSourceError):
    """The client asked for a SASL mechanism the broker does not enable."""

    code = 33


class IllegalSaslState(LogSourceError):
    """A SASL request out of order (SaslAuthenticate before SaslHandshake, a second handshake)."""

    code = 34


class SaslAuthenticationFailed(LogSourceError):
    """SASL authentication failed: a wrong user name or password, or a malformed SASL message."""

    code = 58


class TopicAuthorizationFailed(LogSourceError):
    """The principal is not authorized to access the topic (an ACL denies it or none allows it)."""

    code = 29


class GroupAuthorizationFailed(LogSourceError):
    """The principal is not authorized to access the consumer group."""

    code = 30


class ClusterAuthorizationFailed(LogSourceError):
    """The principal is not authorized for this cluster-level operation."""

    code = 31


class TransactionalIdAuthorizationFailed(LogSourceError):
    """The principal is not authorized to use the transactional id."""

    code = 53


class SecurityDisabled(LogSourceError):
    """Security features (ACLs) are disabled on this broker: authorizer.class.name is not set."""

    code = 54


class ResourceNotFound(LogSourceError):
    """The resource (e.g. a user's SCRAM credential) does not exist."""

    code = 91


class UnacceptableCredential(LogSourceError):
    """The credential is not acceptable (too few iterations, an empty user name or salt)."""

    code = 93


def _all_subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_all_subclasses(sub))
    return out


ERRORS_BY_CODE: dict[int, type[LogSourceError]] = {
    c.code: c for c in _all_subclasses(LogSourceError) if not issubclass(c, ClientError)
}
NONE = 0


def error_for_code(code: int, message: str = "") -> LogSourceError:
    """Return the exception instance for a protocol error code."""
    cls = ERRORS_BY_CODE.get(code, UnknownServerError)
    return cls(message)


def code_of(exc: BaseException) -> int:
    """Return the protocol error code for an exception (unknown ones map to -1)."""
    return exc.code if isinstance(exc, LogSourceError) and not isinstance(exc, ClientError) else -1
