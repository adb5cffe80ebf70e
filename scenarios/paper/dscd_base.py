"""The `[base]` preamble every 004 (DSCD) scenario file starts from: 45 s runs measured in 250 ms
windows after a 15 s warm-up, through DSCD, seeded. The generators add their own enforcer
parameters and aggregates after it."""

DSCD_BASE = '''[base]
duration = "45s"
seed = 1
[base.measure]
window = "250ms"
warmup = "15s"
[base.enforcer]
kind = "dscd"'''
