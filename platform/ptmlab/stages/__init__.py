"""Torch-free stages that belong to the platform itself (the science stages live in
lightning_modules/stages)."""
