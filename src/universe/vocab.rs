//! Name, occupation and hobby vocabularies, embedded from `data/vocab/` (see its README for
//! provenance and licences).

use std::sync::OnceLock;

/// The embedded vocabularies.
#[derive(Debug)]
pub struct Vocab {
    /// Female first names.
    pub female_first: Vec<&'static str>,
    /// Male first names.
    pub male_first: Vec<&'static str>,
    /// Surnames.
    pub surnames: Vec<&'static str>,
    /// Occupations (lower case, no commas).
    pub occupations: Vec<&'static str>,
    /// Hobby categories, each with its hobbies (no commas).
    pub hobbies: Vec<(&'static str, Vec<&'static str>)>,
}

fn lines(text: &'static str) -> Vec<&'static str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

/// The vocabularies, parsed once.
pub fn vocab() -> &'static Vocab {
    static VOCAB: OnceLock<Vocab> = OnceLock::new();
    VOCAB.get_or_init(|| {
        let mut hobbies: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
        for line in lines(include_str!("../../data/vocab/hobbies.tsv")) {
            let (category, hobby) = line.split_once('\t').unwrap_or(("other", line));
            match hobbies.last_mut() {
                Some((c, items)) if *c == category => items.push(hobby),
                _ => hobbies.push((category, vec![hobby])),
            }
        }
        Vocab {
            female_first: lines(include_str!("../../data/vocab/first_names_female.txt")),
            male_first: lines(include_str!("../../data/vocab/first_names_male.txt")),
            surnames: lines(include_str!("../../data/vocab/surnames.txt")),
            occupations: lines(include_str!("../../data/vocab/occupations.txt")),
            hobbies,
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_and_no_commas() {
        let v = super::vocab();
        assert!(v.female_first.len() > 800 && v.male_first.len() > 800);
        assert_eq!(v.surnames.len(), 8003);
        assert!(v.occupations.len() > 400);
        let hobbies: usize = v.hobbies.iter().map(|(_, h)| h.len()).sum();
        assert!(hobbies > 350);
        let all = v
            .occupations
            .iter()
            .chain(v.hobbies.iter().flat_map(|(_, h)| h));
        for item in all {
            assert!(!item.contains(','), "{item}");
        }
    }
}
