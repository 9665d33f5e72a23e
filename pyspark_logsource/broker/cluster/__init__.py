"""Cluster mode: brokers coordinated through ZooKeeper (Kafka's znode layout, see :mod:`.paths`).

- :mod:`.zk`: the kazoo client, one retry object, version-conditioned writes, session states;
- :mod:`.paths`: znode paths and their JSON shapes;
- :mod:`.registry`: broker registration (``/brokers/ids/<id>``) and the live-broker watch;
- :mod:`.controller`: the elected controller (replica assignment, leader election, deletion);
- :mod:`.member`: what every broker does: watch its partitions' state and drive the broker's roles.
"""
