"""The faust adapter: the only package that imports faust.

``faust -A app worker`` finds ``app.app``, built here from the settings. The
adapter turns faust events into ``RawRecord`` batches, hands them to the
``BatchProcessor`` and owns the acknowledgement: an offset is acked only after
the processor returned, i.e. after the database commit.
"""
