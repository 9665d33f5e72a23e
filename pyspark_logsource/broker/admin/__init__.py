"""The admin APIs that change a cluster: CreatePartitions, AlterConfigs, IncrementalAlterConfigs, and
DescribeConfigs with the dynamic values' sources (:mod:`.handlers`; the config arithmetic is
:mod:`.configs`, CreatePartitions :mod:`.partitions`)."""
