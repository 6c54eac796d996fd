"""The project model every rule queries: files → modules → summaries → the project → values.

The analyses here read one parsed module (its index, bindings, branch facts, training iterations,
per-step contexts, scalers, autocasts, model dtypes) and, through `Project`, the summaries of the
project's other modules, so that a rule in `linter.rules` is a query, not a walker.
"""
