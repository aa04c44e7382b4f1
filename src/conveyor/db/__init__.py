"""Database layer: engine set-up, tables, migrations, wake-up transport."""
