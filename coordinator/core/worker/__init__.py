"""The worker's side of the protocols, sans-I/O: `member` (a connect member, seed 000) and
`classic` (a classic member speaking Kafka Connect's protocol, seed 004); the SDK is their shell."""
