"""`openneuron report SCRIPT [ARGS...]`: run an unchanged PyTorch script on neuron and,
when it exits, report what kept it from running natively and where its time and memory
went: CPU-fallback and host-library ops, float64/complex128 downcasts, Dynamo
compilations, recompilations (with Dynamo's guard-failure text) and graph breaks, peak
memory and the top allocation sites, device time by op and program.

    command.py       the command line; runs the script and writes the outputs
    run.py           runs the script as `python SCRIPT ARGS` would
    collect.py       starts and reads the sources (C++ counters, Dynamo, a sampler)
    sampler.py       the ~20 ms memory and fallback-count sampler thread
    dynamo_events.py Dynamo's compilation records and graph-break log
    frames.py        which stack frame is the user's
    build.py         collected data -> the report document (also the --json output)
    categories.py    device program names -> op categories
    render_text.py   the printed report
    render_html.py   the --html page; svg.py draws its plots
"""

from .command import main

__all__ = ["main"]
