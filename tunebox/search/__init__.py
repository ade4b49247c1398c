"""Search: Optuna ask/tell behind a small strategy adapter, and the sweep loop."""
