"""The conformance checks, one module per lab step; every test names the clause it checks."""
