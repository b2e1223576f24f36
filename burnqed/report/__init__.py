"""The iteration report (docs/pipeline.md, "Report and go/no-go gates"): `build` reads what the iterations published
and builds every section, `document` holds `Report` and `SECTIONS` (every section of report.md in its order), each
section a `section.ReportSection`: the sections over the evals, training, search and gates in `core` (built from
`reading`, their rows in `tables`, the gates decided in `gates`, drawn by `plots`), and those that stand on their own
in `repairs`, `sketches`, `rl_steps`, `study` (the joint study); `markdown` writes report.md.

    report = build.build_report(root="file://./runs", iteration=1, pipeline=cfg.pipeline, store=store)
"""
