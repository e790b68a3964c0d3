"""The worker's side: the HTTP client, the worker SDK and fleet, the admin commands and the demo.

It speaks to the service only over HTTP, through the types of `coordinator.api`: nothing here
imports `coordinator.service`."""
