"""Cluster mode: brokers coordinated through ZooKeeper (Kafka's znode layout, see :mod:`.paths`).

Coordination:

- :mod:`.zk`: the kazoo client, one retry object, version-conditioned writes, session states;
- :mod:`.paths`: znode paths and their JSON shapes (the layout is documented there);
- :mod:`.registry`: broker registration (``/brokers/ids/<id>``) and the live-broker watch;
- :mod:`.controller`: the elected controller (replica assignment, leader election, deletion), fenced by
  ``/controller_epoch``;
- :mod:`.member`: what every broker does: watch the cluster's metadata, drive its roles, fence itself
  when its session is lost;
- :mod:`.topic_handlers`: CreateTopics / DeleteTopics answered by the controller.

Replication: :mod:`.replicas` (the replica manager: high watermark, ISR, ``acks=all``),
:mod:`.replica_fetcher` (followers fetching from leaders), :mod:`.isr` (ISR changes written to
ZooKeeper), :mod:`.handlers` (the leader's side of follower fetches, OffsetForLeaderEpoch).

Running one: :mod:`.zookeeper` (a standalone ZooKeeper server) and :mod:`.local`
(``logsource cluster start|stop``).
"""
