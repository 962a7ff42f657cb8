"""JSON speed machinery: payloads kept as their own bytes until someone reads them.

``lazy_fields``
    Event fields (a tool's input, a tool's result) that hold the source line's
    JSON fragment and parse it on first read, indistinguishably from a parsed
    value.
``fragment_passthrough``
    Whether such a fragment can be written through to ``run --json``'s output
    line as its own bytes and still give the same JSON value.
"""
