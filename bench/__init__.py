"""The benchmark behind the figures in the README: ``python -m bench`` (``--help`` for knobs).

One run starts a local broker, creates a PostgreSQL database, produces one
workload onto one topic, and lets each scenario consume that topic from its
start with a consumer group of its own:

- ``bare``: a faust agent that takes the events and does nothing (the ceiling);
- ``one`` / ``three``: the framework with points-service, then all three
  example consumers, each from empty tables, each checked against what the
  events mean (a fast wrong answer fails the run);
- ``storm``: the topic redelivered to a new group over the database ``three``
  filled, so every event is a duplicate;
- ``storm-redis``: ``three`` again with the Redis prefilter on (which fills
  it), then a storm by a new group (its prefilter namespace is cold) and one
  by the same group (warm), see ``bench.scenarios``;
- latency: the bare agent, ``one`` and ``three`` at half their measured maximum.

Modules: ``options`` (knobs), ``workload``, ``worker`` (processes and their
environment), ``monitor`` (progress from faust's monitor), ``database``,
``session`` (measuring one worker), ``source`` (code fingerprint),
``prefilter_keys``, ``scenarios``, ``latency``, ``results``, ``table``, ``run``
and ``cli``; ``bare_app`` is what the bare agent's worker loads. ``--smoke``
runs it all on ~1.5k events and checks only correctness; the integration test
``test_bench_smoke`` runs that.
"""
