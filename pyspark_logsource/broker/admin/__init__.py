"""The admin APIs that change a cluster or act on its logs: CreatePartitions, AlterConfigs,
IncrementalAlterConfigs, and DescribeConfigs with the dynamic values' sources (:mod:`.handlers`; the config
arithmetic is :mod:`.configs`, CreatePartitions :mod:`.partitions`); DeleteRecords and DescribeLogDirs
(:mod:`.records`)."""
