//! The embedded migrations, the check that a runtime process runs against the schema it was built
//! for, and the grants of the runtime role.

use std::collections::BTreeMap;

use sqlx::migrate::Migrator;
use sqlx::{Acquire, PgPool, Postgres};

use crate::{Error, Result};

/// Every migration of the platform in `migrations/`, embedded in the binary. Shared by
/// `mostrador migrate`, the runtime schema check and all database tests.
///
/// Apps (the retail app) keep their migrations beside their code, in the same history table with
/// versions of their own: each migrator passes over the others' (`ignore_missing`).
pub static MIGRATOR: Migrator = Migrator {
    ignore_missing: true,
    ..sqlx::migrate!("../migrations")
};

/// The schema the api and workers read and write (apps name theirs to [`grant_runtime_role`]).
const RUNTIME_SCHEMA: &str = "mostrador";

/// Applies every pending migration, the platform's then each app's, under sqlx's advisory lock,
/// so concurrent `migrate` jobs are safe.
///
/// # Errors
///
/// A failed migration (its transaction is rolled back) or a migration applied to the database
/// whose file has since changed.
pub async fn migrate(pool: &PgPool, apps: &[&Migrator]) -> Result {
    MIGRATOR.run(pool).await?;
    for app in apps {
        app.run(pool).await?;
    }
    Ok(())
}

/// Fails unless this binary may serve the database's schema: every migration it embeds (the
/// platform's and those of `apps`) is applied, unchanged. Migrations newer than the binary are
/// served, since migrations only add (`migrations/0029_schema_readers.sql`): during a rollout the
/// next release migrates while this one still serves, and after a rollback this one starts on the
/// newer schema. Unless a newer migration removed something, and said so by raising
/// `mostrador.schema_readers.oldest_migration` above the binary's newest.
///
/// Start-up runs it, and so do readiness probes (a database restored from an older backup falls
/// behind a running process).
///
/// # Errors
///
/// [`Error::Schema`] with a message that says what to do when the database is behind the binary,
/// was migrated from different files, or was contracted past what the binary reads.
pub async fn check_schema<'a>(
    db: impl Acquire<'a, Database = Postgres>,
    apps: &[&Migrator],
) -> Result {
    let mut conn = db.acquire().await?;
    // N.B. Runtime-checked queries: `_sqlx_migrations` is sqlx's own table and may not exist yet.
    let has_table: bool =
        sqlx::query_scalar("select to_regclass('public._sqlx_migrations') is not null")
            .fetch_one(&mut *conn)
            .await?;
    let applied: BTreeMap<i64, (bool, Vec<u8>)> = if has_table {
        sqlx::query_as::<_, (i64, bool, Vec<u8>)>(
            "select version, success, checksum from public._sqlx_migrations",
        )
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .map(|(version, success, checksum)| (version, (success, checksum)))
        .collect()
    } else {
        BTreeMap::new()
    };

    let known = || {
        std::iter::once(&MIGRATOR)
            .chain(apps.iter().copied())
            .flat_map(|migrator| migrator.iter())
    };
    let expected = known().filter(|m| m.migration_type.is_up_migration());
    let newest_known = known().map(|m| m.version).max().unwrap_or(0);
    let newest_applied = applied.keys().copied().max().unwrap_or(0);
    let run_migrate = "run `mostrador migrate` with this binary's version";

    for migration in expected {
        match applied.get(&migration.version) {
            None => {
                return Err(Error::Schema(format!(
                    "database schema is behind this binary: migration {} ({}) is not applied; {run_migrate}",
                    migration.version, migration.description
                )));
            }
            Some((false, _)) => {
                return Err(Error::Schema(format!(
                    "migration {} ({}) failed part-way; fix the database, then {run_migrate}",
                    migration.version, migration.description
                )));
            }
            Some((true, checksum)) if *checksum != *migration.checksum => {
                return Err(Error::Schema(format!(
                    "migration {} ({}) was applied from a different file than this binary embeds; \
                     this binary does not match the database",
                    migration.version, migration.description
                )));
            }
            Some(_) => {}
        }
    }
    if newest_applied > newest_known {
        let newest_platform = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
        let (oldest, why): (i64, String) =
            sqlx::query_as("select oldest_migration, why from mostrador.schema_readers")
                .fetch_one(&mut *conn)
                .await?;
        if oldest > newest_platform {
            return Err(Error::Schema(format!(
                "database schema was migrated past what this binary reads (it knows migrations up to \
                 {newest_platform}; the schema needs {oldest} or newer: {why}); deploy a newer release"
            )));
        }
        tracing::debug!(
            newest_applied,
            newest_known,
            "the schema is ahead of this binary: serving it, its newer migrations only add"
        );
    }
    Ok(())
}

/// Grants `role` the runtime privileges and nothing more: SELECT, INSERT, UPDATE and DELETE on the
/// tables of the `mostrador` schema and of the apps' schemas (`app_schemas`), the sequences behind them, and reading the migration history (for
/// [`check_schema`]). Tables that later migrations create get the same grants by default.
///
/// The role cannot create, alter or drop anything. LISTEN and NOTIFY need no privilege.
///
/// # Errors
///
/// [`Error::Invalid`] when the role does not exist (create it, with its password, first).
pub async fn grant_runtime_role(pool: &PgPool, role: &str, app_schemas: &[&str]) -> Result {
    let exists = sqlx::query_scalar!(
        r#"select exists (select 1 from pg_catalog.pg_roles where rolname = $1) as "exists!""#,
        role
    )
    .fetch_one(pool)
    .await?;
    if !exists {
        return Err(Error::Invalid {
            field: "runtime role",
            reason: format!("role {role:?} does not exist; create it first"),
        });
    }

    let mut tx = pool.begin().await?;
    for schema in std::iter::once(&RUNTIME_SCHEMA).chain(app_schemas) {
        // `format(%I)` quotes both names as identifiers, so neither can inject SQL.
        let statements = sqlx::query_scalar!(
            r#"
            select unnest(array[
                format('grant usage on schema %I to %I', $1::text, $2::text),
                format('grant select, insert, update, delete on all tables in schema %I to %I', $1, $2),
                format('grant usage, select on all sequences in schema %I to %I', $1, $2),
                format('alter default privileges in schema %I grant select, insert, update, delete on tables to %I', $1, $2),
                format('alter default privileges in schema %I grant usage, select on sequences to %I', $1, $2)
            ]) as "statement!"
            "#,
            schema,
            role
        )
        .fetch_all(&mut *tx)
        .await?;
        for statement in statements {
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
                .execute(&mut *tx)
                .await?;
        }
    }
    let grant_history = sqlx::query_scalar!(
        r#"select format('grant select on public._sqlx_migrations to %I', $1::text) as "statement!""#,
        role
    )
    .fetch_one(&mut *tx)
    .await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(grant_history))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}
