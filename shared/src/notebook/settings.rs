//! Each user's settings: for now the time zone, which decides what "today" is for the user's
//! writing (`add_note` without a date, `nib notes add`).
//!
//! Kept at `U#{user}` / `SETTINGS#TZ` (the notebook partition, beside the Notion connection),
//! so every class function that writes for the user reads it with the access it already has
//! (no IAM change), and account deletion removes it with the partition. The zone's name is in
//! the clear, like the Notion database id: it is a setting, not notebook content, and reading it
//! opens no key. No item means UTC.
//!
//! Zones are IANA names checked against the zone database compiled into the binary (`jiff`
//! with `tzdb-bundle-always`): the Lambda image may have no `/usr/share/zoneinfo`, and the same
//! database everywhere means a name accepted on one back end is accepted on the other.

use serde::{Deserialize, Serialize};

use super::records::{decode, encode, user_pk};
use super::{Notebook, NotebookError};
use crate::domain::{Date, UserId};
use crate::ports::{Cond, Item};

/// The sort key of a user's time zone.
pub const TIME_ZONE_SK: &str = "SETTINGS#TZ";
/// The zone of a user who never set one.
pub const DEFAULT_TIME_ZONE: &str = "UTC";

#[derive(Serialize, Deserialize)]
struct TimeZoneRecord {
    /// The IANA name as the zone database spells it (`Europe/Berlin`).
    zone: String,
    /// When it was set, unix seconds.
    set_at: i64,
}

/// A time zone by its IANA name, checked against the compiled-in zone database.
#[derive(Debug, Clone)]
pub struct UserTimeZone {
    name: String,
    zone: jiff::tz::TimeZone,
}

impl UserTimeZone {
    /// The zone named `name` (`Europe/Berlin`, `UTC`; case as the database spells it or not);
    /// an unknown or empty name is `Invalid`, naming it.
    pub fn parse(name: &str) -> Result<Self, NotebookError> {
        let trimmed = name.trim();
        let invalid = || {
            NotebookError::Invalid(format!(
                "{trimmed:?} is not a time zone: give an IANA name such as Europe/Berlin or America/New_York"
            ))
        };
        if trimmed.is_empty() || trimmed.len() > 64 {
            return Err(invalid());
        }
        let zone = jiff::tz::TimeZone::get(trimmed).map_err(|_| invalid())?;
        // The database's own spelling, so `europe/berlin` is kept as `Europe/Berlin`.
        let name = zone.iana_name().unwrap_or(trimmed).to_owned();
        Ok(UserTimeZone { name, zone })
    }

    pub fn utc() -> Self {
        UserTimeZone {
            name: DEFAULT_TIME_ZONE.to_owned(),
            zone: jiff::tz::TimeZone::UTC,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The calendar day in this zone at `unix` seconds.
    pub fn date_at(&self, unix: i64) -> Date {
        let local = jiff::Timestamp::from_second(unix)
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
            .to_zoned(self.zone.clone())
            .date();
        // jiff's dates are always valid calendar days, so this conversion cannot fail for
        // any instant `Timestamp` takes.
        let month = time::Month::try_from(local.month() as u8).unwrap_or(time::Month::January);
        let day = time::Date::from_calendar_date(i32::from(local.year()), month, local.day() as u8)
            .unwrap_or(time::Date::MIN);
        Date::from_time(day)
    }
}

impl Notebook {
    /// The user's time zone (UTC until one is set).
    pub async fn time_zone(&self, user: &UserId) -> Result<UserTimeZone, NotebookError> {
        let Some(item) = self.store.get(&user_pk(user), TIME_ZONE_SK).await? else {
            return Ok(UserTimeZone::utc());
        };
        let record: TimeZoneRecord = decode("time zone", &item.body)?;
        // A name the database once had and no longer has (zones are rarely removed, but a
        // newer binary could lack one) falls back to UTC rather than failing every write.
        Ok(UserTimeZone::parse(&record.zone).unwrap_or_else(|_| UserTimeZone::utc()))
    }

    /// Sets the user's time zone; a name that is not a zone is refused and changes nothing.
    pub async fn set_time_zone(
        &self,
        user: &UserId,
        name: &str,
    ) -> Result<UserTimeZone, NotebookError> {
        let zone = UserTimeZone::parse(name)?;
        let record = TimeZoneRecord {
            zone: zone.name().to_owned(),
            set_at: self.clock.unix(),
        };
        self.store
            .put(
                Item {
                    pk: user_pk(user),
                    sk: TIME_ZONE_SK.to_owned(),
                    gsi1: None,
                    version: 0,
                    expires_at: None,
                    body: encode(&record),
                },
                Cond::None,
            )
            .await?;
        Ok(zone)
    }

    /// Today in the user's time zone: the day a note without a date is written on.
    pub async fn today_for(&self, user: &UserId) -> Result<Date, NotebookError> {
        Ok(self.time_zone(user).await?.date_at(self.clock.unix()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_are_iana_names_spelled_as_the_database_does() {
        assert_eq!(
            UserTimeZone::parse("Europe/Berlin").unwrap().name(),
            "Europe/Berlin"
        );
        assert_eq!(
            UserTimeZone::parse(" europe/berlin ").unwrap().name(),
            "Europe/Berlin"
        );
        assert_eq!(UserTimeZone::parse("UTC").unwrap().name(), "UTC");
        for bad in [
            "",
            "Mars/Olympus_Mons",
            "Europe/",
            "+02:00",
            "../etc/passwd",
        ] {
            assert!(
                matches!(UserTimeZone::parse(bad), Err(NotebookError::Invalid(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_day_is_the_zones_day() {
        // 2026-06-19 23:30 UTC is already the 20th in Berlin (UTC+2 in summer) and still the
        // 19th in New York.
        let at = 1_781_911_800;
        let day = |z: &str| UserTimeZone::parse(z).unwrap().date_at(at).to_string();
        assert_eq!(UserTimeZone::utc().date_at(at).to_string(), "2026-06-19");
        assert_eq!(day("Europe/Berlin"), "2026-06-20");
        assert_eq!(day("America/New_York"), "2026-06-19");
        assert_eq!(day("Pacific/Kiritimati"), "2026-06-20");
        assert_eq!(day("Etc/GMT+12"), "2026-06-19");
    }
}
