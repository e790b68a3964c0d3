"""What every other layer uses: Kafka client settings (`kafka_config`), the compacted topic
(`topic`) and its partitions (`partitions`: which one a group lives in, reading one as a
coordinator loads it), the local Apache Kafka (`devbroker`), jars from Maven Central (`maven`),
`coordinator serve` as a child process (`process`), logging (`logs`) and times and tables for
people (`text`). Nothing here imports the state machine, the service or the SDK."""
