"""``slackwise manifests``: validate the config's Knative Services and write every object the
cluster needs (functions, the adapter, RBAC, the NetworkPolicy) as files, or to standard output
(``-o -``, for ``kubectl apply -f -``), with the images from a registry and tag of your own."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from knative.cluster.crd_schema import ManifestError, knative_dir
from knative.cluster.images import VERSION, Images
from knative.cluster.manifests import KUSTOMIZATION, Bundle, build, kustomization, render
from slackwise_config import ConfigError, load_config

__all__ = ["add_arguments", "main", "run", "write"]


def write(bundle: Bundle, out: Path) -> list[Path]:
    """Write the bundle's files into ``out`` (created if needed), and the kustomize base that
    lists them; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, objects in sorted(bundle.files.items()):
        path = out / name
        path.write_text(render(objects, bundle.comments.get(name)), encoding="utf-8")
        written.append(path)
    base = out / KUSTOMIZATION
    base.write_text(render([kustomization(bundle)]), encoding="utf-8")
    return [*written, base]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``slackwise manifests``."""
    parser.add_argument("-c", "--config", required=True, help="YAML config file")
    parser.add_argument(
        "-o",
        "--out",
        required=True,
        help="directory for the YAML files, or - for one stream on stdout (kubectl apply -f -)",
    )
    parser.add_argument("-n", "--namespace", help="namespace for every object (default: none set)")
    parser.add_argument(
        "--registry",
        default="slackwise",
        help="where the images are: REGISTRY/<model>:TAG and REGISTRY/adapter:TAG (default "
        "slackwise; a function's own image: in the config is kept)",
    )
    parser.add_argument("--tag", default=VERSION, help=f"the images' tag (default {VERSION})")
    parser.add_argument(
        "--adapter-image", help="the adapter's image in full (default REGISTRY/adapter:TAG)"
    )
    parser.add_argument(
        "--knative-dir",
        help="Knative 1.23 CRDs and config maps (default: $SLACKWISE_KNATIVE_DIR or "
        "../shared/knative next to the repository)",
    )


def run(args: argparse.Namespace) -> int:
    """Validate, write the files (or the stream), say how to apply; 0, or 2 on an error."""
    to_stdout = args.out == "-"
    notes = sys.stderr if to_stdout else sys.stdout  # stdout carries only YAML with -o -
    try:
        config = load_config(args.config)
        config_text = Path(args.config).read_text(encoding="utf-8")
        knative = Path(args.knative_dir) if args.knative_dir else knative_dir()
        bundle = build(
            config,
            config_text,
            adapter_image=args.adapter_image,
            namespace=args.namespace,
            knative=knative,
            schema_required=bool(args.knative_dir),  # a directory given must hold the CRD
            images=Images(registry=args.registry, tag=args.tag),
        )
    except (ConfigError, ManifestError) as exc:
        print(f"slackwise manifests: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"slackwise manifests: {args.config}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if to_stdout:
        docs = [
            render(objects, bundle.comments.get(name))
            for name, objects in sorted(bundle.files.items())
        ]
        sys.stdout.write("---\n".join(docs))
    else:
        for path in write(bundle, Path(args.out)):
            print(f"# wrote {path}", file=notes)
    for line in bundle.warnings:
        print(f"# warning: {line}", file=notes)
    how = "-f -" if to_stdout else f"-k {args.out}"  # a directory is a kustomize base
    print(f"# apply with: kubectl apply {how}", file=notes)
    print("# or create the functions with kn:", file=notes)
    for line in bundle.kn_lines:
        print(line, file=notes)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m knative.cluster.manifests_command -c CONFIG -o DIR``."""
    parser = argparse.ArgumentParser(
        prog="python -m knative.cluster.manifests_command", description=__doc__
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
