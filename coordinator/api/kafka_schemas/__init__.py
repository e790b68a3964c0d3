"""Kafka message schemas kafka-python 3 does not ship, in the JSON form of Kafka's own
`clients/src/main/resources/common/message` definitions, loaded by `kafka_protocol`: forwarding
(Envelope, KIP-590) and the principal it carries (DefaultPrincipalData). Their bytes are checked
against kafka-clients 4.3.1 by tests/test_kafka_protocol.py."""
