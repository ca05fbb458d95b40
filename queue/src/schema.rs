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

/// Fails unless the database is at exactly the schema version this binary embeds: the platform's
/// migrations and those of `apps`.
///
/// # Errors
///
/// [`Error::Schema`] with a message that names `mostrador migrate` when the database is behind the
/// binary, ahead of it (a newer binary migrated it), or was migrated from different files.
pub async fn check_schema<'a>(
    db: impl Acquire<'a, Database = Postgres>,
    apps: &[&Migrator],
) -> Result {
    check(db, apps, false).await
}

/// Whether a running process may go on serving: every migration of the platform is applied,
/// unchanged; migrations newer than the binary are accepted, because during a rollout the new
/// release migrates the database while the previous one still serves, and migrations only add
/// (they never change what an earlier release reads or writes). Readiness probes use this; start-up
/// uses the exact [`check_schema`].
///
/// # Errors
///
/// [`Error::Schema`] when the database is behind the binary or was migrated from different files.
pub async fn check_schema_serves<'a>(db: impl Acquire<'a, Database = Postgres>) -> Result {
    check(db, &[], true).await
}

async fn check<'a>(
    db: impl Acquire<'a, Database = Postgres>,
    apps: &[&Migrator],
    ahead_is_fine: bool,
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
    if newest_applied > newest_known && !ahead_is_fine {
        return Err(Error::Schema(format!(
            "database schema is ahead of this binary (at migration {newest_applied}, binary knows up to \
             {newest_known}); deploy the newer binary, or run `mostrador migrate` with it"
        )));
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
