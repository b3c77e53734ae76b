//! Enums that travel as text: in JSON, in Postgres `TEXT` columns, in metrics
//! labels and query strings. Each is declared once with [`text_enum!`], which
//! writes its name table (`ALL`, `as_str`), `Display`, `FromStr` and serde, so
//! a new variant is one line. The store's column impls (`store::columns`) and
//! the api's OpenAPI schemas (`api::schema`) are written once from the same
//! table.

/// A name that is none of an enum's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {name:?}")]
pub struct UnknownName {
    /// What the enum names, as a person reads it (`run state`).
    pub what: &'static str,
    pub name: String,
}

/// Declares an enum whose variants are named by text:
///
/// ```ignore
/// text_enum! {
///     /// Why a run was queued.
///     pub enum Trigger as "trigger" {
///         Manual = "manual",
///         Schedule = "schedule",
///     }
/// }
/// ```
///
/// It derives `Debug, Clone, Copy, PartialEq, Eq, Hash` and serde (each
/// variant by its name) and gives `ALL` (declaration order), `as_str`,
/// `Display` and `FromStr` (an [`UnknownName`] for anything else). Further
/// attributes (`#[derive(Default)]`, docs) go on the enum and its variants.
macro_rules! text_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident as $what:literal {
            $(
                $(#[$variant_meta:meta])*
                $variant:ident = $text:literal,
            )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        $vis enum $name {
            $(
                $(#[$variant_meta])*
                #[serde(rename = $text)]
                $variant,
            )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: [$name; [$($text),+].len()] = [$($name::$variant),+];

            /// The value's name wherever it travels as text.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::domain::text_enum::UnknownName;

            fn from_str(name: &str) -> Result<Self, Self::Err> {
                $name::ALL
                    .into_iter()
                    .find(|value| value.as_str() == name)
                    .ok_or_else(|| $crate::domain::text_enum::UnknownName {
                        what: $what,
                        name: name.to_owned(),
                    })
            }
        }
    };
}

pub(crate) use text_enum;

#[cfg(test)]
mod tests {
    text_enum! {
        /// A test enum.
        enum Colour as "colour" {
            Red = "red",
            DarkBlue = "dark.blue",
        }
    }

    #[test]
    fn names_round_trip_through_text_and_json() {
        assert_eq!(Colour::ALL, [Colour::Red, Colour::DarkBlue]);
        for colour in Colour::ALL {
            assert_eq!(colour.as_str().parse::<Colour>(), Ok(colour));
            assert_eq!(colour.to_string(), colour.as_str());
            let json = serde_json::to_value(colour).unwrap();
            assert_eq!(json, colour.as_str());
            assert_eq!(serde_json::from_value::<Colour>(json).unwrap(), colour);
        }
        let unknown = "green".parse::<Colour>().unwrap_err();
        assert_eq!(unknown.to_string(), "unknown colour \"green\"");
        assert!(serde_json::from_str::<Colour>("\"green\"").is_err());
    }
}
