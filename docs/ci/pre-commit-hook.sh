#!/bin/sh
# Refuse a commit whose bundle is stale (docs/ci.md). Copy to .git/hooks/pre-commit.
exec gpuplan check gpuplan.yaml --out clusters/prod/gpu --templates templates --catalog catalog
