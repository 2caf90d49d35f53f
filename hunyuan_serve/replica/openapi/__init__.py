"""The API surface as documented: the OpenAPI document, each operation's declaration, the /docs page."""
