"""The HTTP contract (DESIGN §7), shared by the server and the worker SDK: the wire types, declared
once, and the OpenAPI document generated from them."""
