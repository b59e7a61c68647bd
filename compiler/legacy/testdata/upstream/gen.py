#!/usr/bin/env python3
"""Lists the long flags an sgl-router / SMG argument definition declares, one per line.

    gen.py rust   < main.rs         # clap: #[arg(long ...)] fields, long = "...", aliases,
                                    # and the hand-parsed "--prefill"/"--encode"
    gen.py python < router_args.py  # argparse: "--{prefix}name" and "--name" option strings

The lists beside this script were made from the sources named in README.md; regenerate
them with regen.sh when an upstream version is added. TestFlagTableCoversUpstream checks
that docs/migrate.md and migrate's flag tables name every flag listed here.
"""
import re
import sys


def rust(src):
    flags = set()
    i = 0
    lines = src.split("\n")
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("#[arg(") or line.startswith("#[clap("):
            attr = line
            depth = line.count("(") - line.count(")")
            while depth > 0:
                i += 1
                attr += " " + lines[i].strip()
                depth += lines[i].count("(") - lines[i].count(")")
            # The field the attribute belongs to: the next line that is not an attribute
            # or a doc comment.
            j = i + 1
            while j < len(lines) and (lines[j].strip().startswith("#[") or lines[j].strip().startswith("///")):
                j += 1
            m = re.match(r"\s*(?:pub\s+)?([a-z_][a-z0-9_]*)\s*:", lines[j])
            if re.search(r"\blong\b", attr) and m:
                named = re.search(r'\blong\s*=\s*"([^"]+)"', attr)
                flags.add("--" + (named.group(1) if named else m.group(1).replace("_", "-")))
                for a in re.findall(r'\b(?:visible_)?alias\s*=\s*"([^"]+)"', attr):
                    flags.add("--" + a)
                for group in re.findall(r"\b(?:visible_)?aliases\s*=\s*\[([^\]]*)\]", attr):
                    flags.update("--" + a for a in re.findall(r'"([^"]+)"', group))
        i += 1
    # Flags read from argv by hand, outside clap.
    flags.update(re.findall(r'"(--(?:prefill|encode|decode))"', src))
    return flags


def python(src):
    flags = set(re.findall(r'f"--\{prefix\}([a-z0-9][a-z0-9-]*)"', src))
    flags = {"--" + f for f in flags}
    flags.update(re.findall(r'add_argument\(\s*"(--[a-z0-9][a-z0-9-]*)"', src))
    return flags


def main():
    kind = sys.argv[1]
    flags = {"rust": rust, "python": python}[kind](sys.stdin.read())
    flags.discard("--help")
    flags.discard("--version")
    for f in sorted(flags):
        print(f)


if __name__ == "__main__":
    main()
