"""The contracts of the coordinator's two transports, shared by the servers and the worker SDK
(DESIGN §7, §12): the HTTP wire types, declared once, and the OpenAPI document generated from them;
Kafka's binary protocol (`kafka_protocol`)."""
