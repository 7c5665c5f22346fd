"""The demo workspace: its generator, tables, volume and filtered lists."""
