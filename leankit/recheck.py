"""burnqed's kernel recheck as Lean text: the command every compile text ends with (`recheck_command`, module
docstring of `burnqed.lean.soundness`) and the one information message it logs (`RECHECK_REPORT`). Pure text, no
Lean: the soundness rules send the command and read the report back, and the embedded Lean (minilean and its replay
server), which cannot run metaprograms, answers this one command as Lean would.

    recheck_command("t")                 # "run_cmd Lean.Elab.Command.liftCoreM do\n  let env ← Lean.getEnv\n…"
    RECHECK_REPORT.format(name="t", count=1)   # "burnqed kernel recheck: t ok (1 constants)"
"""

from __future__ import annotations

RECHECK_REPORT = "burnqed kernel recheck: {name} ok ({count} constants)"


def _lean_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def recheck_command(name: str) -> str:
    """A trusted command, run after the proof, that has the kernel check again every constant NAME transitively
    uses among those the file added (`burnqed.lean.soundness`, module docstring), whatever option the proof set. It logs
    `RECHECK_REPORT` once everything was added; any failure is an error. Inductive types, their constructors and
    recursors (and `Quot`'s constants) are referred to under their own names, not re-added: the kernel checked them
    when their declaring command was elaborated (the kernel's `add_inductive`/`add_quot` take no `check` flag, so
    `debug.skipKernelTC` cannot switch them off: docs/lean.md), and no tactic declares them. Only core API that
    Lean v4.15-v4.29 share is used (docs/lean.md: `Environment.find?`, `getModuleIdxFor?`, `Expr.getUsedConstants`,
    `Expr.replace`, `Lean.addDecl`, `withOptions`); options are set by name, so an option a version lacks
    (`Elab.async` before v4.17) is no error. `run_cmd` evaluates it, so the REPL's imports must include Lean
    (Mathlib does); without them the recheck fails and no proof counts."""
    report = RECHECK_REPORT.format(name=name, count="{count}").split("{count}")
    return (
        "run_cmd Lean.Elab.Command.liftCoreM do\n"
        "  let env ← Lean.getEnv\n"
        "  let usedBy : Lean.ConstantInfo → Array Lean.Name := fun info =>\n"
        "    info.type.getUsedConstants ++ (match info with\n"
        "      | .thmInfo val => val.value.getUsedConstants\n"
        "      | .defnInfo val => val.value.getUsedConstants\n"
        "      | .opaqueInfo val => val.value.getUsedConstants\n"
        "      | _ => #[])\n"
        "  let kernelChecked : Lean.Name → Bool := fun name =>\n"
        "    match env.find? name with\n"
        "    | some (.inductInfo _) | some (.ctorInfo _) | some (.recInfo _) | some (.quotInfo _) => true\n"
        "    | _ => false\n"
        f"  let mut names : Array Lean.Name := #[``{name}]\n"
        "  let mut infos : Array Lean.ConstantInfo := #[]\n"
        "  let mut cursor := 0\n"
        "  while cursor < names.size do\n"
        "    let name := names[cursor]!\n"
        "    cursor := cursor + 1\n"
        "    let some info := env.find? name\n"
        "      | throwError \"burnqed kernel recheck: unknown constant {name}\"\n"
        "    infos := infos.push info\n"
        "    for used in usedBy info do\n"
        "      if (env.getModuleIdxFor? used).isNone && !names.contains used && !kernelChecked used then\n"
        "        names := names.push used\n"
        "  let freshName : Lean.Name → Lean.Name := fun name => `_burnqed_recheck ++ name\n"
        "  let relabel : Lean.Expr → Lean.Expr := fun expr => Lean.Expr.replace (fun sub =>\n"
        "    match sub with\n"
        "    | .const name levels =>\n"
        "      if names.contains name then some (Lean.mkConst (freshName name) levels) else none\n"
        "    | _ => none) expr\n"
        "  let mut pending := infos\n"
        "  let mut checked : Array Lean.Name := #[]\n"
        "  while !pending.isEmpty do\n"
        "    let ready := pending.filter fun info =>\n"
        "      (usedBy info).all fun used => !names.contains used || checked.contains used\n"
        "    if ready.isEmpty then\n"
        "      throwError \"burnqed kernel recheck: {pending.map (·.name)} depend on each other\"\n"
        "    for info in ready do\n"
        "      let decl ← match info with\n"
        "        | .thmInfo val => pure (Lean.Declaration.thmDecl { name := freshName val.name, levelParams := "
        "val.levelParams, type := relabel val.type, value := relabel val.value, all := [freshName val.name] })\n"
        "        | .defnInfo val => pure (Lean.Declaration.defnDecl { name := freshName val.name, levelParams := "
        "val.levelParams, type := relabel val.type, value := relabel val.value, hints := val.hints, "
        "safety := val.safety, all := [freshName val.name] })\n"
        "        | .opaqueInfo val => pure (Lean.Declaration.opaqueDecl { name := freshName val.name, levelParams := "
        "val.levelParams, type := relabel val.type, value := relabel val.value, isUnsafe := val.isUnsafe, "
        "all := [freshName val.name] })\n"
        "        | _ => throwError \"burnqed kernel recheck: {info.name} is neither a theorem nor a definition\"\n"
        "      Lean.withOptions (fun opts => (opts.setBool `debug.skipKernelTC false).setBool `Elab.async false)\n"
        "        (Lean.addDecl decl)\n"
        "      checked := checked.push info.name\n"
        "    pending := pending.filter fun info => !checked.contains info.name\n"
        f"  let report : String := {_lean_string(report[0])} ++ Nat.repr infos.size ++ {_lean_string(report[1])}\n"
        "  Lean.logInfo (Lean.toMessageData report)\n"
    )
