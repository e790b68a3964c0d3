"""The gateway (`coordinator gateway`, DESIGN §12): a stateless proxy in Kafka's binary protocol in
front of the real brokers, which sends our groups to the coordinators' Kafka listeners. A service of
its own beside `coordinator/service`, which it does not import."""
